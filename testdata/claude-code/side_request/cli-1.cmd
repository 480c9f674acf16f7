$ claude -p Give me a plain answer. --allowedTools Bash,Read

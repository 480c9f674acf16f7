$ claude -p What was the word? --continue --allowedTools Bash,Read

$ claude -p Print hello with a shell command. --allowedTools Bash,Read

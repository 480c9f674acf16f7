$ claude -p Print a marker with a shell command. --allowedTools Bash,Read

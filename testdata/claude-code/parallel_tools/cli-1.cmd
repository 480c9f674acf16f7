$ claude -p Print two words and read a file, all at once. --allowedTools Bash,Read

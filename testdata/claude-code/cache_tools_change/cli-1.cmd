$ claude -p Remember the word pineapple. --allowedTools Bash,Read --tools Bash,Read

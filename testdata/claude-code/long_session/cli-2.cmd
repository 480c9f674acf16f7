$ claude -p Count some more. --continue --allowedTools Bash

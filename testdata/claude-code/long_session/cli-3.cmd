$ claude -p And once more, longer. --continue --allowedTools Bash

$ claude --allowedTools Bash

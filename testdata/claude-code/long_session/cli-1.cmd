$ claude -p Count for me, step by step. --allowedTools Bash

$ claude -p Remember the word pineapple. --allowedTools Bash,Read --model claude-opus-5-5

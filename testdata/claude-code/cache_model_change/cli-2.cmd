$ claude -p What was the word? --continue --allowedTools Bash,Read --model claude-sonnet-4-5

$ claude -p Are you still there? --resume 0c9b1f36-6d2a-45f4-9634-c77b3119a867 --allowedTools Bash,Read

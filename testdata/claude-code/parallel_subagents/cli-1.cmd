$ claude -p Delegate an echo to a subagent. --allowedTools Bash,Read,Agent

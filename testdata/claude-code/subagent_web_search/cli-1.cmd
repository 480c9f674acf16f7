$ claude -p Have a subagent search the web for cctrace. --allowedTools Agent,WebSearch

$ claude -p Search the web for cctrace. --allowedTools WebSearch

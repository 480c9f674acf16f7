$ claude -p Give me a plain answer. --allowedTools Bash,Read --settings {"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/tmp/tmp.FG1kjQelQL/stop-hook.sh"}]}]}}

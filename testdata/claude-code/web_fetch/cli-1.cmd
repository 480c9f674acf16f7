$ claude -p Fetch the page and tell me its marker. --allowedTools WebFetch --settings {"skipWebFetchPreflight": true}

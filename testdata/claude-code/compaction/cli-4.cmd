$ claude -p And now, what was the word? --resume c8f26a66-bdc2-4baa-91d1-0a8726eccf0d --allowedTools Bash,Read

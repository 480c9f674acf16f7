$ claude --permission-mode plan

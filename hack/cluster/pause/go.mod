module passhat.local/pause

go 1.21

$ go run ./testdata/sdk-client

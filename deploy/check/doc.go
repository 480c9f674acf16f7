// Package check holds the tests of the deploy stack's configuration files (see the module's
// go.mod). It has no code of its own beyond test helpers; run it with `go test` from deploy/check
// or through scripts/deploy-check.sh.
package check

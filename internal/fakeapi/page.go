package fakeapi

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
)

// PageURL stands for the page a scenario's WebFetch call fetches, in the call's input; a server
// made WithPageURL answers with that URL instead.
const PageURL = "https://fakeapi.invalid/cctrace-page"

// PageMarker is a text of the page NewPageServer serves, which the page summary request carries.
const PageMarker = "cctrace-fakeapi-page-marker"

// NewPageServer serves, over HTTPS on 127.0.0.1, the page a WebFetch call fetches. Claude Code
// fetches it itself, so it must trust the server's certificate: PageCertPEM is that certificate,
// for NODE_EXTRA_CA_CERTS. Close it when done.
func NewPageServer() *httptest.Server {
	return httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<html><head><title>cctrace page</title></head><body><h1>A page for cctrace</h1>" +
			"<p>This page carries the marker " + PageMarker + " and nothing else of note.</p></body></html>"))
	}))
}

// PageCertPEM returns the certificate of a server NewPageServer made, PEM-encoded.
func PageCertPEM(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

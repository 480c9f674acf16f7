package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		delay   time.Duration
		wantErr bool
	}{
		{name: "ok", status: http.StatusOK},
		{name: "no content is healthy", status: http.StatusNoContent},
		{name: "unavailable", status: http.StatusServiceUnavailable, wantErr: true},
		{name: "not found", status: http.StatusNotFound, wantErr: true},
		{name: "too slow", status: http.StatusOK, delay: 500 * time.Millisecond, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(tt.delay):
				case <-r.Context().Done():
				}
				w.WriteHeader(tt.status)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := probe(ctx, srv.Client(), srv.URL+"/healthz")
			if (err != nil) != tt.wantErr {
				t.Fatalf("probe() error = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestProbeRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if err := probe(context.Background(), http.DefaultClient, url); err == nil {
		t.Fatal("probe() of a closed port succeeded")
	}
}

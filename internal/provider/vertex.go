package provider

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// vertexScope is the OAuth scope Vertex AI's API accepts.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// vertexAuth authenticates to Vertex AI with Google Application Default Credentials:
// GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login, or the metadata server of
// a Google Cloud machine (GCE_METADATA_HOST names another). The token source refreshes its
// token before it expires; finding the credentials is retried on the next request until it
// succeeds, so that cctrace can start before they exist.
type vertexAuth struct {
	mu  sync.Mutex
	src oauth2.TokenSource // nil until credentials were found
}

func newVertexAuth() *vertexAuth { return &vertexAuth{} }

func (v *vertexAuth) source(ctx context.Context) (oauth2.TokenSource, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.src != nil {
		return v.src, nil
	}
	// The credentials outlive this request: they must not be tied to its context.
	creds, err := google.FindDefaultCredentials(context.WithoutCancel(ctx), vertexScope)
	if err != nil {
		return nil, fmt.Errorf("finding Google Application Default Credentials: %w", err)
	}
	v.src = oauth2.ReuseTokenSource(nil, creds.TokenSource)
	return v.src, nil
}

func (v *vertexAuth) token(ctx context.Context) (*oauth2.Token, error) {
	src, err := v.source(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := src.Token()
	if err != nil {
		return nil, fmt.Errorf("getting a Google access token: %w", err)
	}
	return tok, nil
}

func (v *vertexAuth) authorize(r *http.Request) error {
	tok, err := v.token(r.Context())
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

func (v *vertexAuth) check(ctx context.Context) (string, error) {
	if _, err := v.token(ctx); err != nil {
		return "", err
	}
	return "Google Application Default Credentials", nil
}

func (v *vertexAuth) fix() string {
	return "run 'gcloud auth application-default login', set GOOGLE_APPLICATION_CREDENTIALS to a service account key file, or run cctrace with a service account on Google Cloud"
}

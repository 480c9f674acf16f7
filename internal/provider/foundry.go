package provider

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// foundryScope is the Microsoft Entra ID scope of Azure AI services, Foundry's included.
const foundryScope = "https://cognitiveservices.azure.com/.default"

// foundryAuth authenticates to Microsoft Foundry with the resource's key (the api-key header)
// or, without one, a Microsoft Entra ID token from azidentity's default chain (environment
// service principal, workload identity, managed identity, Azure CLI), kept until shortly before
// it expires.
type foundryAuth struct {
	key  string
	cred azcore.TokenCredential // nil with a key

	mu  sync.Mutex
	tok azcore.AccessToken
}

func newFoundryAuth(key string) (*foundryAuth, error) {
	if key != "" {
		return &foundryAuth{key: key}, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("foundry: setting up Microsoft Entra ID credentials: %w", err)
	}
	return &foundryAuth{cred: cred}, nil
}

// credentialTimeout bounds one attempt to get a token.
const credentialTimeout = 30 * time.Second

// tokenMargin is how long before its expiry a token is replaced.
const tokenMargin = 5 * time.Minute

func (f *foundryAuth) token(ctx context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tok.Token != "" && time.Until(f.tok.ExpiresOn) > tokenMargin {
		return f.tok.Token, nil
	}
	// The token outlives this request, so not its context; but a stalled identity endpoint must
	// not hold every request (and shutdown) behind this lock for ever.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), credentialTimeout)
	defer cancel()
	tok, err := f.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{foundryScope}})
	if err != nil {
		return "", fmt.Errorf("getting a Microsoft Entra ID token: %w", err)
	}
	f.tok = tok
	return tok.Token, nil
}

func (f *foundryAuth) authorize(r *http.Request) error {
	if f.key != "" {
		r.Header.Set("Api-Key", f.key)
		return nil
	}
	tok, err := f.token(r.Context())
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

func (f *foundryAuth) check(ctx context.Context) (string, error) {
	if f.key != "" {
		return "the Foundry resource key (CCTRACE_FOUNDRY_API_KEY)", nil
	}
	if _, err := f.token(ctx); err != nil {
		return "", err
	}
	return "Microsoft Entra ID", nil
}

func (f *foundryAuth) fix() string {
	return "set CCTRACE_FOUNDRY_API_KEY to the resource's key, or sign in with 'az login' (or give cctrace a managed identity or AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET)"
}

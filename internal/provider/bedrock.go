package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// bedrockService is the SigV4 signing name of both Bedrock endpoints, runtime and control plane.
const bedrockService = "bedrock"

// bedrockAuth signs requests with AWS SigV4, with credentials from the AWS SDK's default chain
// (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared config and
// credentials files, SSO, web identity, the container and instance metadata endpoints), cached
// and refreshed before they expire.
type bedrockAuth struct {
	creds  aws.CredentialsProvider
	region string
	signer *v4.Signer
	now    func() time.Time
}

// newBedrockAuth loads the AWS configuration. region overrides the configuration's region.
func newBedrockAuth(ctx context.Context, region string) (*bedrockAuth, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("bedrock: loading the AWS configuration: %w", err)
	}
	return &bedrockAuth{creds: cfg.Credentials, region: cfg.Region, signer: v4.NewSigner(), now: time.Now}, nil
}

// authorize signs r. SigV4 covers the payload's hash, so the body is read whole first: Bedrock is
// the one provider whose requests cctrace does not stream through as they arrive.
func (b *bedrockAuth) authorize(r *http.Request) error {
	if b.creds == nil {
		return fmt.Errorf("no AWS credentials found")
	}
	creds, err := b.creds.Retrieve(r.Context())
	if err != nil {
		return fmt.Errorf("getting AWS credentials: %w", err)
	}
	body := []byte{}
	if r.Body != nil && r.Body != http.NoBody {
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return &bodyError{err: err}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	if len(body) == 0 {
		r.Body = http.NoBody
	}
	sum := sha256.Sum256(body)
	if err := b.signer.SignHTTP(r.Context(), creds, r, hex.EncodeToString(sum[:]), bedrockService, b.region, b.now()); err != nil {
		return fmt.Errorf("signing the request: %w", err)
	}
	return nil
}

func (b *bedrockAuth) check(ctx context.Context) (string, error) {
	if b.creds == nil {
		return "", fmt.Errorf("no AWS credentials found")
	}
	creds, err := b.creds.Retrieve(ctx)
	if err != nil {
		return "", fmt.Errorf("getting AWS credentials: %w", err)
	}
	return fmt.Sprintf("AWS credentials from %s, region %s", creds.Source, b.region), nil
}

func (b *bedrockAuth) fix() string {
	return "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (run 'aws sso login' for an SSO profile), or run cctrace with an IAM role"
}

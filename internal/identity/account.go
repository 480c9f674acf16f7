package identity

import "strings"

// AccountPrefix starts every account fingerprint.
const AccountPrefix = "acct-"

// Account returns the fingerprint of a subscription account (metadata.user_id's account_uuid):
// AccountPrefix and 16 hex digits of the same keyed HMAC as Of, over a domain of its own so
// that an account and a credential never share a fingerprint. The limits an account is held to
// are shown under it, so that its id reaches no label or page.
func (f *Fingerprinter) Account(id string) string {
	return AccountPrefix + strings.TrimPrefix(f.Of("account\x00"+id), CredentialPrefix)
}

// LimitAccount is the account a request's limits count against: the subscription account's
// fingerprint when the request names one (account, its account_uuid), else the credential's
// fingerprint, else "".
func (f *Fingerprinter) LimitAccount(account, credential string) string {
	if account = CleanValue(account); account != "" {
		return f.Account(account)
	}
	return credential
}

package app

import "context"

// formsSignIn reads the account's Forms API sign-in again (the forms
// source's SignIn; nothing for a key) and mirrors the client it leaves
// in acct.Client.
func (acct *Account) formsSignIn(ctx context.Context) error {
	err := acct.forms.SignIn(ctx)
	acct.mu.Lock()
	defer acct.mu.Unlock()
	acct.Client = acct.forms.Client()
	return err
}

// formsClient is the account's Forms API client now (nil: none).
func (acct *Account) formsClient() *FormsClient {
	if acct.forms != nil {
		return acct.forms.Client()
	}
	acct.mu.Lock()
	defer acct.mu.Unlock()
	return acct.Client
}

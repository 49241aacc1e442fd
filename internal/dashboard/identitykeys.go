package dashboard

import (
	"context"
	"net/http"
)

// IdentityKeys is the gateway's signer of identity assertions, as the
// Users and tokens page shows it: an instance admin may rotate its key.
type IdentityKeys interface {
	// KeyID is the id (kid) of the key that signs now; ids are public.
	KeyID() string
	// Rotate makes the next key sign now; the old one stays published
	// until its last token has expired.
	Rotate(ctx context.Context) error
}

// apiRotateIdentity rotates the identity signing key now, for every
// gateway on the store. Audited identity.rotate with key ids only.
func (d *Dashboard) apiRotateIdentity(w http.ResponseWriter, r *http.Request) error {
	if d.identity == nil {
		return errorf(http.StatusNotFound, "This gateway signs no identity assertions, so it has no key to rotate.")
	}
	before := d.identity.KeyID()
	if err := d.identity.Rotate(r.Context()); err != nil {
		return err
	}
	after := d.identity.KeyID()
	d.log.Info("identity key rotated", "kid", after, "retired", before, "by", principalFrom(r.Context()).name())
	d.audit(r, 0, "identity.rotate", after, map[string]any{"kid": before}, map[string]any{"kid": after})
	writeJSON(w, http.StatusOK, map[string]string{"kid": after, "retired": before})
	return nil
}

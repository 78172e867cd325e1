package deploy

import (
	"context"
	"errors"

	"github.com/projhost/projhost/registry"
)

// Outcome is what Ensure did.
type Outcome string

// Outcomes.
const (
	// AlreadyActive: the active version already had the module's bytes; the pointer is unchanged.
	AlreadyActive Outcome = "already active"
	// ActivatedStored: a stored, inactive version had them; it was activated.
	ActivatedStored Outcome = "activated a stored version"
	// Deployed: no version had them; they were deployed as a new version and activated.
	Deployed Outcome = "deployed"
)

// Ensured is what Ensure did.
type Ensured struct {
	Outcome  Outcome
	Version  registry.Version // the active version now: the module's bytes
	Previous int64            // the version active before (0: none); Version.Number when unchanged
	Deploy   Result           // the deploy's result, when Outcome is Deployed
	Retried  bool             // the first attempt met registry.ErrConflict
}

// Ensure makes wasm projection's active version, storing a new version only when no version
// holds the same bytes (`projhost run --handler`):
//
//   - the active version has wasm's SHA-256: nothing changes (AlreadyActive);
//   - a stored, inactive version has it (the latest such): it is activated (ActivatedStored);
//   - else wasm is deployed as the next version with note and activated (Deployed), validated
//     as Deploy validates it (the Deployer's MaxModuleSize, loader checks, compilation and smoke
//     run): a module that fails is refused and nothing is stored.
//
// In the first two cases the module store is given the bytes again (a no-op when it holds
// them), so that a version whose bytes left the store, or a store other than the one it was
// deployed to, runs from the bytes at hand (they hash to the version's SHA-256, validated when
// it was deployed).
//
// When another deploy, activate or rollback changes the pointer between Ensure's read and its
// write (registry.ErrConflict), Ensure tries once more from the pointer as it now is. Workers
// started at once with the same module then agree (the second finds it active: two versions
// with the same bytes may be stored, one of them active); with different modules the last to
// try wins. A second conflict is returned: the active version is changing under it.
// Errors: those of Deploy and Activate.
func (d *Deployer) Ensure(ctx context.Context, projection string, wasm []byte, note string) (Ensured, error) {
	out, err := d.ensure(ctx, projection, wasm, note)
	if errors.Is(err, registry.ErrConflict) {
		out, err = d.ensure(ctx, projection, wasm, note)
		out.Retried = true
	}
	return out, err
}

func (d *Deployer) ensure(ctx context.Context, projection string, wasm []byte, note string) (Ensured, error) {
	var out Ensured
	a, err := d.cfg.Registry.Active(ctx, projection)
	if err != nil {
		return out, err
	}
	a.Projection = projection
	vs, err := d.cfg.Registry.Versions(ctx, projection)
	if err != nil {
		return out, err
	}
	sum := registry.Sum(wasm)
	var stored registry.Version // the latest version with wasm's bytes
	for _, v := range vs {
		if v.SHA256 != sum {
			continue
		}
		if v.Number == a.Version {
			out = Ensured{Outcome: AlreadyActive, Version: v, Previous: v.Number}
			return out, d.cfg.Blobs.Put(ctx, sum, wasm)
		}
		if v.Number > stored.Number {
			stored = v
		}
	}
	if stored.Number != 0 {
		if err := d.cfg.Blobs.Put(ctx, sum, wasm); err != nil {
			return out, err
		}
		if _, _, err := activateFrom(ctx, d.cfg.Registry, d.cfg.Blobs, a, stored.Number); err != nil {
			return out, err
		}
		return Ensured{Outcome: ActivatedStored, Version: stored, Previous: a.Version}, nil
	}
	res, err := d.Deploy(ctx, projection, wasm, Options{Note: note, Activate: true})
	out.Deploy = res
	if err != nil {
		return out, err
	}
	return Ensured{Outcome: Deployed, Version: res.Version, Previous: res.Active.Previous, Deploy: res}, nil
}

package registry

import "time"

// VersionJSON is a version's JSON shape, as `projhost handlers list --json` prints it and the
// admin API returns it.
type VersionJSON struct {
	Projection string `json:"projection"`
	Version    int64  `json:"version"`
	Active     bool   `json:"active"` // the projection's active version
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"` // bytes
	ABI        int    `json:"abi"`
	Uploaded   string `json:"uploaded"` // RFC 3339, UTC, whole seconds
	Note       string `json:"note"`
}

// ToJSON returns v's JSON shape; active is the projection's active version number (Active.Version).
func ToJSON(v Version, active int64) VersionJSON {
	return VersionJSON{Projection: v.Projection, Version: v.Number, Active: v.Number == active, SHA256: v.SHA256, Size: v.Size,
		ABI: v.ABI, Uploaded: time.UnixMilli(v.UploadedMs).UTC().Format(time.RFC3339), Note: v.Note}
}

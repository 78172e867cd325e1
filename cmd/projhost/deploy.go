package main

// `projhost deploy` and `projhost handlers list|activate|rollback`: the module registry's
// verbs (package deploy; the registry in the projection's store, module bytes in the module
// store).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/projhost/projhost/deploy"
	"github.com/projhost/projhost/host"
	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/s3blobs"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/source/journal"
)

// moduleFlags choose the module store: --module-store DIR or s3://BUCKET[/PREFIX] (default:
// DIR/modules next to the embedded store in --data; required with --store dynamodb), and
// --s3-endpoint for a local S3-compatible server (--region is the store flags'). check is the
// one place they are validated, for every verb that takes them (deploy, run).
type moduleFlags struct {
	store    string
	endpoint string
}

func (f *moduleFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.store, "module-store", "", "where uploaded module bytes live by SHA-256: a directory, or s3://BUCKET[/PREFIX] (objects PREFIX/<sha256>.wasm; the bucket must exist) (default: the modules directory in --data with the embedded store; required with --store dynamodb)")
	cmd.Flags().StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint URL for an s3:// --module-store, e.g. http://127.0.0.1:4569 for tools/s3rver (default: the AWS default chain's for --region)")
}

// isS3 tells whether --module-store names a bucket.
func (f *moduleFlags) isS3() bool { return strings.HasPrefix(f.store, "s3:") }

// check validates the module store flags with the store flags sf of the same command; need says
// the command uses the module store (every verb that takes them does: deploy, handlers
// activate|rollback, and run, which runs the registry's active version and with --handler
// deploys that file first). Errors name the flag and what to do.
func (f *moduleFlags) check(sf *storeFlags, need bool) error {
	if f.isS3() {
		if _, _, err := s3blobs.ParseURL(f.store); err != nil {
			return fmt.Errorf("--module-store: %w", err)
		}
	} else if strings.Contains(f.store, "://") {
		return fmt.Errorf("--module-store %q: give a directory or s3://BUCKET[/PREFIX] (lowercase s3://)", f.store)
	} else if f.endpoint != "" {
		return fmt.Errorf("--s3-endpoint needs --module-store s3://BUCKET[/PREFIX]")
	}
	if f.endpoint != "" {
		if u, err := url.Parse(f.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--s3-endpoint %q: want an http:// or https:// URL, e.g. http://127.0.0.1:4569", f.endpoint)
		}
	}
	if need && f.store == "" && !sf.embedded() {
		return fmt.Errorf("--store %s needs --module-store DIR or s3://BUCKET[/PREFIX] (where handler modules are kept): add --module-store DIR|s3://BUCKET", sf.store)
	}
	return nil
}

// blobs opens the module store (check first). A directory is created when create; a bucket must
// exist (s3blobs.Open checks it with HeadBucket).
func (f *moduleFlags) blobs(ctx context.Context, sf *storeFlags, create bool) (registry.Blobs, error) {
	if err := f.check(sf, true); err != nil {
		return nil, err
	}
	if f.isS3() {
		bucket, prefix, _ := s3blobs.ParseURL(f.store)
		c, err := s3blobs.NewClient(ctx, s3blobs.ClientConfig{Endpoint: f.endpoint, Region: sf.region})
		if err != nil {
			return nil, err
		}
		return s3blobs.Open(ctx, c, bucket, prefix)
	}
	dir := f.store
	if dir == "" {
		dir = filepath.Join(sf.data, "modules")
	}
	if !create {
		return registry.OpenDirBlobs(dir), nil
	}
	return registry.NewDirBlobs(dir)
}

// registryOf returns the store's registry, or an error when the backend has none.
func registryOf(st *stores) (registry.Store, error) {
	if st.Registry == nil {
		return nil, errors.New("this store has no module registry")
	}
	return st.Registry, nil
}

func init() {
	var sf storeFlags
	var srcf sourceFlags
	var mf moduleFlags
	var name, handler, note, memLimit, maxSize string
	var activate bool
	var smoke int
	cmd := &cobra.Command{
		Use:   "deploy",
		Short: "Upload a handler module as a projection's next version, validated first; --activate makes it the one the workers run",
		Long: `Deploy validates a handler module and stores it as the next version (1, 2, 3, ...) of the
projection --name: the module store keeps its bytes by SHA-256, the projection's store (the
embedded store or DynamoDB, the same store flags as run) its version number, size, ABI version,
upload time and --note. Nothing is stored unless every check passes: the size (--max-module-size),
the loader's checks (ABI marker, exports, imports, memory under --memory-limit), compilation, and
a smoke run of the module over the latest --smoke-events events of each open shard of the
source (the local journal in --data, or --source kinesis --stream S: there the records of the
last 10 s, widening ×10 up to the stream's retention until enough came, at most 50 GetRecords
per shard), each shard into an empty scratch read model, which prints the mutations per event.
A module that fails is refused with what is wrong.

--activate then makes it the active version, provided no other deploy, activate or rollback
changed the active version since this deploy started (of two racing, exactly one wins; the
other's version stays stored: projhost handlers activate --version N).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" || handler == "" {
				return fmt.Errorf("--name and --handler are required")
			}
			if err := projection.CheckName(name); err != nil {
				return fmt.Errorf("--name: %w", err)
			}
			if err := srcf.check(cmd, &sf); err != nil {
				return err
			}
			memPages, err := host.ParseMemoryLimit(memLimit)
			if err != nil {
				return fmt.Errorf("--memory-limit: %w", err)
			}
			maxBytes, err := parseMaxModuleSize(maxSize)
			if err != nil {
				return err
			}
			if err := mf.check(&sf, true); err != nil {
				return err
			}
			if smoke < 0 {
				return fmt.Errorf("--smoke-events %d: use 0 (no smoke run) or more", smoke)
			}
			wasm, err := readModule(handler, maxBytes, "--max-module-size")
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			// The source first: a mistyped --data (no journal) creates nothing. Without a smoke
			// run no source is read.
			logger := slog.New(slog.DiscardHandler) // the smoke run's guest log is not the user's concern here
			var events source.Source
			if smoke > 0 {
				src, err := srcf.open(ctx, &sf, journal.OpenReadOnly, logger)
				if err != nil {
					return fmt.Errorf("%w (the smoke run reads it; --smoke-events 0 deploys without one)", err)
				}
				defer src.close()
				events = src.Source
			}
			if err := mf.check(&sf, true); err != nil {
				return err
			}
			st, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			reg, err := registryOf(st)
			if err != nil {
				return err
			}
			blobs, err := mf.blobs(ctx, &sf, true)
			if err != nil {
				return err
			}
			rt, err := host.NewRuntime(ctx, host.WithLogger(logger), host.WithMemoryLimitPages(memPages))
			if err != nil {
				return err
			}
			defer rt.Close(context.Background())
			n := smoke
			if n == 0 {
				n = -1
			}
			d, err := deploy.New(deploy.Config{Registry: reg, Blobs: blobs, Runtime: rt, Source: events,
				MaxModuleSize: int(maxBytes), SmokeEvents: n})
			if err != nil {
				return err
			}
			res, err := d.Deploy(ctx, name, wasm, deploy.Options{Note: note, Activate: activate})
			if err != nil && res.Version.Number == 0 {
				if errors.Is(err, host.ErrInvalidModule) || errors.Is(err, deploy.ErrSmokeFailed) || errors.Is(err, deploy.ErrTooLarge) {
					return fmt.Errorf("%s refused, nothing stored: %w", handler, err)
				}
				return fmt.Errorf("nothing stored: %w", err) // not the module's fault: a missing stream, the store
			}
			printDeploy(cmd.OutOrStdout(), handler, wasm, res)
			return err
		},
	}
	sf.register(cmd)
	srcf.register(cmd)
	mf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "projection name")
	f.StringVar(&handler, "handler", "", "handler module (.wasm, projhost ABI v1)")
	f.StringVar(&note, "note", "", fmt.Sprintf("a note stored with the version (at most %d bytes)", registry.MaxNoteBytes))
	f.BoolVar(&activate, "activate", false, "make the new version the active one (what the workers run)")
	f.IntVar(&smoke, "smoke-events", deploy.DefaultSmokeEvents, "latest events of each open shard the smoke run handles (0: no smoke run)")
	f.StringVar(&memLimit, "memory-limit", host.DefaultMemoryLimit, "the workers' --memory-limit: the module's declared memory must fit it")
	registerMaxModuleSize(f, &maxSize)
	rootCmd.AddCommand(cmd)
}

// readModule reads the module file path, refusing what is not a regular file (a FIFO or a
// device would block or never end) and a file over limit bytes (named by flag) before reading
// more than limit+1 bytes of it.
// registerMaxModuleSize adds --max-module-size (deploy and run --handler).
func registerMaxModuleSize(f *pflag.FlagSet, v *string) {
	f.StringVar(v, "max-module-size", "64MiB", "largest module accepted for storing, in binary units, a multiple of 64KiB")
}

// parseMaxModuleSize checks --max-module-size and returns it in bytes.
func parseMaxModuleSize(s string) (int64, error) {
	pages, err := host.ParseMemoryLimit(s)
	if err != nil {
		return 0, fmt.Errorf("--max-module-size %q: want a size in binary units, a multiple of 64KiB up to 4GiB, e.g. 64MiB", s)
	}
	return int64(pages) * 65536, nil
}

func readModule(path string, limit int64, flag string) ([]byte, error) {
	b, err := host.ReadModuleFile(path, limit)
	if errors.Is(err, host.ErrModuleTooLarge) {
		return nil, fmt.Errorf("refused, nothing stored: %w (%s)", err, flag)
	}
	return b, err
}

func printDeploy(w io.Writer, handler string, wasm []byte, res deploy.Result) {
	fmt.Fprintf(w, "validated %s: %d bytes, sha256:%s, compiled in %s\n", handler, len(wasm), res.Version.SHA256, res.Compile.Round(time.Millisecond))
	if res.Smoke.Skipped != "" {
		fmt.Fprintf(w, "smoke run: none (%s)\n", res.Smoke.Skipped)
	} else {
		fmt.Fprintf(w, "smoke run: %d events of %d shards, %d mutations (%.2f per event)\n", res.Smoke.Events, len(res.Smoke.Shards),
			res.Smoke.Mutations, float64(res.Smoke.Mutations)/float64(res.Smoke.Events))
	}
	fmt.Fprintf(w, "stored version %d of %s\n", res.Version.Number, res.Version.Projection)
	if res.Activated {
		fmt.Fprintf(w, "version %d of %s is active (was %s)\n", res.Active.Version, res.Version.Projection, versionName(res.Active.Previous))
	}
}

func versionName(n int64) string {
	if n == 0 {
		return "none"
	}
	return "version " + strconv.FormatInt(n, 10)
}

func init() {
	hc := &cobra.Command{Use: "handlers", Short: "List a projection's handler module versions; activate one or roll back"}
	rootCmd.AddCommand(hc)

	var lsf storeFlags
	var lname string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the versions of --name with the active one marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lname == "" {
				return fmt.Errorf("--name is required")
			}
			ctx := cmd.Context()
			st, err := lsf.openReadOnly(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			reg, err := registryOf(st)
			if err != nil {
				return err
			}
			vs, err := reg.Versions(ctx, lname)
			if err != nil {
				return err
			}
			a, err := reg.Active(ctx, lname)
			if err != nil {
				return err
			}
			return printVersions(cmd.OutOrStdout(), vs, a, asJSON)
		},
	}
	lsf.register(list)
	list.Flags().StringVar(&lname, "name", "", "projection name")
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON object per version")
	hc.AddCommand(list)

	var asf storeFlags
	var amf moduleFlags
	var aname string
	var version int64
	act := &cobra.Command{
		Use:   "activate",
		Short: "Make version --version of --name the active one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if aname == "" || version < 1 {
				return fmt.Errorf("--name and --version N (1 or more) are required")
			}
			return movePointer(cmd, &asf, &amf, aname, func(ctx context.Context, reg registry.Store, blobs registry.Blobs) (registry.Active, bool, error) {
				return deploy.Activate(ctx, reg, blobs, aname, version)
			})
		},
	}
	asf.register(act)
	amf.register(act)
	act.Flags().StringVar(&aname, "name", "", "projection name")
	act.Flags().Int64Var(&version, "version", 0, "version number (projhost handlers list)")
	hc.AddCommand(act)

	var rsf storeFlags
	var rmf moduleFlags
	var rname string
	rb := &cobra.Command{
		Use:   "rollback",
		Short: "Make the previously active version of --name active again (a second rollback undoes the first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rname == "" {
				return fmt.Errorf("--name is required")
			}
			return movePointer(cmd, &rsf, &rmf, rname, func(ctx context.Context, reg registry.Store, blobs registry.Blobs) (registry.Active, bool, error) {
				a, err := deploy.Rollback(ctx, reg, blobs, rname)
				return a, err == nil, err
			})
		},
	}
	rsf.register(rb)
	rmf.register(rb)
	rb.Flags().StringVar(&rname, "name", "", "projection name")
	hc.AddCommand(rb)
}

// movePointer opens the store and the module store (move checks the version's bytes there)
// and runs move, printing the pointer written, or that nothing changed.
func movePointer(cmd *cobra.Command, sf *storeFlags, mf *moduleFlags, name string,
	move func(context.Context, registry.Store, registry.Blobs) (registry.Active, bool, error)) error {
	ctx := cmd.Context()
	if err := mf.check(sf, true); err != nil {
		return err
	}
	st, err := sf.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	reg, err := registryOf(st)
	if err != nil {
		return err
	}
	blobs, err := mf.blobs(ctx, sf, false)
	if err != nil {
		return err
	}
	a, changed, err := move(ctx, reg, blobs)
	if err != nil {
		return err
	}
	if !changed {
		fmt.Fprintf(cmd.OutOrStdout(), "version %d of %s is already active: nothing changed\n", a.Version, name)
		return nil
	}
	fmt.Fprintf(cmd.OutOrStdout(), "version %d of %s is active (was %s)\n", a.Version, name, versionName(a.Previous))
	return nil
}

func printVersions(w io.Writer, vs []registry.Version, a registry.Active, asJSON bool) error {
	rows := make([]registry.VersionJSON, len(vs))
	for i, v := range vs {
		rows[i] = registry.ToJSON(v, a.Version)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no versions (projhost deploy --name NAME --handler H.wasm --activate)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tACTIVE\tSHA256\tSIZE\tABI\tUPLOADED\tNOTE")
	for _, r := range rows {
		mark := ""
		if r.Active {
			mark = "*"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\tv%d\t%s\t%s\n", r.Version, mark, r.SHA256[:12], r.Size, r.ABI, r.Uploaded, escapeText(r.Note))
	}
	return tw.Flush()
}

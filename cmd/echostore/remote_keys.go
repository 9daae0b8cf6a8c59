package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/sealed"
)

// newRemoteCmd is the remote's own maintenance: the keys of encryption at
// rest (docs/FORMAT.md, "Sealed objects"; rotation in docs/CONFIG.md).
func newRemoteCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remote",
		Short: "The remote's encryption keys (keys, reseal)",
		Long: `Maintenance of the remote (--remote) itself, not of a data dir. Output is JSON.
keys counts the remote's objects by the id of the key that encrypted them
(one ranged read of 48 bytes per object; no key needed): a key of which no
object is left can leave the keyring (--remote-old-key-file,
remote_old_key_files). reseal encrypts again with the write key
(--remote-key-file) every object another key of the keyring encrypted, and
encrypts every object not encrypted yet (a remote written before
--remote-key-file); run it while no serve or volume command writes to the
remote.`,
	}
	cmd.AddCommand(
		&cobra.Command{
			Use: "keys", Short: "Count the remote's objects by the key that encrypted them", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ring, err := g.keyring()
				if err != nil {
					return err
				}
				return withRemote(cmd.Context(), g, func(ctx context.Context, s remote.Store) error {
					c, err := sealed.Survey(ctx, s, "")
					if err != nil {
						return err
					}
					return printJSON(g.stdout, newKeysReport(c, ring))
				})
			},
		},
		&cobra.Command{
			Use: "reseal", Short: "Encrypt with the write key every object an older key encrypted, or none", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ring, err := g.keyring()
				if err != nil {
					return err
				}
				if ring == nil {
					return usageError("remote reseal: no key: give --remote-key-file (the new key) and --remote-old-key-file (each older key)")
				}
				return withRemote(cmd.Context(), g, func(ctx context.Context, s remote.Store) error {
					res, err := sealed.Reseal(ctx, sealed.New(s, ring), "")
					if err != nil {
						return err
					}
					return printJSON(g.stdout, struct {
						Checked   int    `json:"checked"`
						Resealed  int    `json:"resealed"`
						Encrypted int    `json:"encrypted"`
						WriteKey  string `json:"write_key"`
					}{res.Checked, res.Resealed, res.Encrypted, ring.WriteID().String()})
				})
			},
		},
	)
	return cmd
}

// withRemote runs f on the remote's store, opened as it is (no key).
func withRemote(ctx context.Context, g *globals, f func(context.Context, remote.Store) error) error {
	s, err := remote.Open(ctx, g.remoteURL(), drivers.All()...)
	if err != nil {
		return fmt.Errorf("remote %s: %w", g.remoteShown(), err)
	}
	defer s.Close()
	if err := f(ctx, s); err != nil {
		return fmt.Errorf("remote %s: %w", g.remoteShown(), err)
	}
	return nil
}

// keyCount is one key of `remote keys`.
type keyCount struct {
	ID      string `json:"id"`
	Objects int    `json:"objects"`
	// Role is "write" or "read" for a key of the given keyring, "" for
	// one it lacks.
	Role string `json:"role"`
}

// keysReport is the output of `remote keys`.
type keysReport struct {
	Objects   int        `json:"objects"`
	NotSealed int        `json:"not_sealed"`
	Keys      []keyCount `json:"keys"`
}

func newKeysReport(c sealed.Census, ring *sealed.Keyring) keysReport {
	r := keysReport{Objects: c.Objects, NotSealed: c.NotSealed, Keys: []keyCount{}}
	var ids []sealed.KeyID
	if ring != nil {
		ids = ring.ReadIDs()
	}
	for i, id := range ids {
		role := "read"
		if i == 0 {
			role = "write"
		}
		r.Keys = append(r.Keys, keyCount{ID: id.String(), Objects: c.ByKey[id], Role: role})
	}
	var others []keyCount
	for id, n := range c.ByKey {
		if !slices.Contains(ids, id) {
			others = append(others, keyCount{ID: id.String(), Objects: n})
		}
	}
	slices.SortFunc(others, func(a, b keyCount) int { return b.Objects - a.Objects })
	r.Keys = append(r.Keys, others...)
	return r
}

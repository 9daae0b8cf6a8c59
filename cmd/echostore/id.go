package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/echostore/echostore/brand"
	"github.com/spf13/cobra"
)

// nodeFromEnv returns the node number from ECHOSTORE_NODE (default 0).
func nodeFromEnv() (int, error) {
	v := os.Getenv("ECHOSTORE_NODE")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > brand.MaxNode {
		return 0, fmt.Errorf("ECHOSTORE_NODE=%q: want a whole number from 0 to %d", v, brand.MaxNode)
	}
	return n, nil
}

func newIDCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Mint and inspect branded ids",
	}
	var brandName string
	var count int
	mint := &cobra.Command{
		Use:   "mint",
		Short: "Mint branded ids for this node (ECHOSTORE_NODE), one per line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := brand.New(brandName)
			if err != nil {
				return exitError{exitUsage, fmt.Errorf("--brand: %w", err)}
			}
			if count < 1 || count > 1_000_000 {
				return usageError("-n %d: want 1 to 1000000", count)
			}
			node, err := nodeFromEnv()
			if err != nil {
				return err
			}
			m, err := brand.NewMinter(node)
			if err != nil {
				return err
			}
			var sb strings.Builder
			for range count {
				id, err := m.Mint()
				if err != nil {
					return err
				}
				sb.WriteString(b.Format(id))
				sb.WriteByte('\n')
			}
			_, err = fmt.Fprint(g.stdout, sb.String())
			return err
		},
	}
	mint.Flags().StringVar(&brandName, "brand", string(brand.EVT), "brand of the ids (EVT, JOB, …)")
	mint.Flags().IntVarP(&count, "count", "n", 1, "how many ids")

	parse := &cobra.Command{
		Use:   "parse ID [ID …]",
		Short: "Print the fields of branded ids or Redis stream ids as JSON lines",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			type out struct {
				ID      string `json:"id"`
				Brand   string `json:"brand,omitempty"`
				RedisID string `json:"redis_id"`
				Time    string `json:"time"`
				Node    int    `json:"node"`
				Seq     int    `json:"seq"`
			}
			// Check every argument before printing anything.
			rows := make([]out, 0, len(args))
			for _, a := range args {
				var x brand.Branded
				if strings.IndexByte(a, '_') >= 0 {
					p, err := brand.Parse(a)
					if err != nil {
						return err
					}
					x = p
				} else {
					id, err := brand.ParseRedisID(a)
					if err != nil {
						return err
					}
					x = brand.Branded{Brand: brand.EVT, ID: id}
				}
				rows = append(rows, out{
					ID: x.String(), Brand: string(x.Brand), RedisID: x.ID.RedisID(),
					Time: x.ID.Time().Format(time.RFC3339Nano), Node: x.ID.Node(), Seq: x.ID.Seq(),
				})
			}
			enc := json.NewEncoder(g.stdout)
			for _, r := range rows {
				if err := enc.Encode(r); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.AddCommand(mint, parse)
	return cmd
}

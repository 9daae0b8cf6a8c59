package mq

import (
	"context"
	"fmt"
)

// FeedKeys returns the stream keys in the change feed feed (DirtySetKey).
func (c *Client) FeedKeys(ctx context.Context, feed string) ([]string, error) {
	keys, err := c.rdb.Do(ctx, c.rdb.B().Smembers().Key(feed).Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("SMEMBERS %s: %w", feed, err)
	}
	return keys, nil
}

// TakeFromFeed removes stream keys from the change feed feed: a reader
// takes a stream out before it cycles it, so that an append after names
// it again.
func (c *Client) TakeFromFeed(ctx context.Context, feed string, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	if err := c.rdb.Do(ctx, c.rdb.B().Srem().Key(feed).Member(keys...).Build()).Error(); err != nil {
		return fmt.Errorf("SREM %s: %w", feed, err)
	}
	return nil
}

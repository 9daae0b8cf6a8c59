package mq

import (
	"os"
	"testing"

	"github.com/echostore/echostore/internal/testserver"
)

var servers testserver.Pool

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	os.Exit(servers.Run(m))
}

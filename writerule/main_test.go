package writerule

import (
	"os"
	"testing"

	"github.com/echostore/echostore/internal/testserver"
)

var servers testserver.Pool

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

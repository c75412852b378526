// Command localmoto serves moto's DynamoDB on 127.0.0.1 one request at a
// time, as the tests start it: moto_server itself serves requests on
// several threads over a backend that is not thread-safe, and under the
// quickstart's concurrency it answers some of them 500 (and two
// conditional writes of one key can both pass).
//
//	go run ./internal/dynamotest/localmoto -port 8000
//	go run ./examples/quickstart -endpoint http://127.0.0.1:8000
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/dynabill/billing/internal/dynamotest"
)

func main() {
	port := flag.Int("port", 8000, "the loopback `port` to serve on")
	flag.Parse()
	cmd, err := dynamotest.MotoCommand(*port)
	if err != nil {
		log.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "localmoto: serving DynamoDB on http://127.0.0.1:%d (Ctrl-C stops it)\n", *port)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; _ = cmd.Process.Signal(syscall.SIGTERM) }()
	if err := cmd.Wait(); err != nil {
		log.Print(err)
	}
}

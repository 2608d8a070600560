// Command probe is a tiny static HTTP(S) client used as a test image: it GETs a URL and prints
// the status and body. With -timeout it retries until it gets a 200 or the time is up; it exits
// non-zero on failure. With -stay it sleeps after success (so a pod stays Running).
//
// Usage: probe [-timeout 90s] [-cacert FILE] [-stay] URL
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	fmt.Printf("GET %s: %d\n%s\n", url, resp.StatusCode, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func newClient(cacert string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}, nil
}

func main() {
	timeout := flag.Duration("timeout", 0, "retry until success for this long (0: one try)")
	cacert := flag.String("cacert", "", "PEM CA bundle to trust for https URLs")
	stay := flag.Bool("stay", false, "after success, sleep forever")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: probe [-timeout D] [-cacert FILE] [-stay] URL")
		os.Exit(2)
	}
	client, err := newClient(*cacert)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		os.Exit(2)
	}
	url := flag.Arg(0)
	deadline := time.Now().Add(*timeout)
	for {
		err := get(client, url)
		if err == nil {
			fmt.Println("PROBE-OK")
			break
		}
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		if !time.Now().Before(deadline) {
			fmt.Println("PROBE-FAILED")
			os.Exit(1)
		}
		time.Sleep(2 * time.Second)
	}
	if *stay {
		select {}
	}
}

# spine: the two entry points a newcomer needs are `make demo` and `make test`.
# Both install what is missing first (`make deps`), so they work on a fresh Debian 12.

CARGO ?= cargo
SHELL := /bin/bash
SPINE := target/release/spine
# clang/llvm build the bundled programs; libbpf-dev gives <bpf/bpf_helpers.h>; bpftool and
# iproute2 drive the kernel side of tests; tcpdump reads back the captures spine writes;
# python3 runs the Python client library's test; bird2 peers over BGP in the FIB mirror's tests,
# frr (zebra, bgpd) installs what it learns from it as nexthop objects (tests/frr.rs);
# iputils-ping, iperf3 and ethtool drive the router's end-to-end test (tests/router_host.rs).
APT_PKGS := clang llvm libbpf-dev bpftool iproute2 libc6-dev tcpdump python3 bird2 frr \
	iputils-ping iperf3 ethtool
# Files whose absence means a package must be installed.
NEED := /usr/bin/clang /usr/bin/llvm-objdump /usr/include/bpf/bpf_helpers.h /usr/sbin/bpftool \
	/usr/sbin/ip /usr/bin/tcpdump /usr/bin/python3 /usr/sbin/bird /usr/bin/ping /usr/bin/iperf3 \
	/usr/sbin/ethtool /usr/lib/frr/zebra

.PHONY: deps build demo test lint fmt fuzz clean clients

deps:
	@missing=""; for f in $(NEED); do [ -e $$f ] || missing="$$missing $$f"; done; \
	if [ -n "$$missing" ]; then \
		echo "deps: missing$$missing; installing $(APT_PKGS)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	fi
	@command -v $(CARGO) >/dev/null || { echo "deps: cargo not found; install Rust (rustup) first" >&2; exit 1; }
	@if command -v rustup >/dev/null; then \
		for c in rustfmt clippy; do \
			rustup component list --installed 2>/dev/null | grep -q "^$$c" || rustup component add $$c; \
		done; \
	fi

build: deps
	$(CARGO) build --release -p spine-cli

# The main job on its built-in default: a bundled XDP program over a bundled capture.
demo: build
	$(SPINE) demo

# Every test: unit, conformance, loader robustness, and differential tests against the
# kernel's BPF_PROG_TEST_RUN (these need root; without bpf(2) they skip loudly).
test: deps
	$(CARGO) test --workspace

# Short fuzz runs of the object loader and of the verifier's soundness (cargo-fuzz needs a
# nightly toolchain; without one this says SKIPPED and succeeds). Seeds: the bundled objects.
FUZZ_SECONDS ?= 30
fuzz: deps
	@if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then \
		echo "fuzz: SKIPPED: no nightly toolchain (cargo-fuzz needs one; rustup toolchain install nightly)"; \
		exit 0; \
	fi; \
	command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked || exit 1; \
	$(CARGO) build -p spine-progs || exit 1; \
	out=$$(ls -td target/debug/build/spine-progs-*/out | head -1); \
	mkdir -p fuzz/corpus/obj_parse && cp -f $$out/*.o fuzz/corpus/obj_parse/ || exit 1; \
	cd fuzz && for t in obj_parse verify_run endpoint_rings; do \
		echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
		cargo +nightly fuzz run -O $$t -- -max_total_time=$(FUZZ_SECONDS) 2>&1 | tail -3; \
		[ $${PIPESTATUS[0]} -eq 0 ] || exit 1; \
	done

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# The endpoint client libraries for C (a shared library) and Python (pip install clients/python).
clients: deps
	clang -Wall -Wextra -O2 -shared -fPIC clients/c/spine_endpoint.c -o target/libspine_endpoint.so
	@echo "built target/libspine_endpoint.so (header: clients/c/spine_endpoint.h); Python: pip install clients/python"

clean:
	$(CARGO) clean

# olympus build. `make` builds the C libraries and the Python extension in place;
# `make test` runs every C and Python test; `make demo` runs the tutorial example.
PY        ?= /usr/bin/python3
CC        ?= gcc
BUILD     ?= build
OPT       ?= -O2
WERROR    ?= $(if $(CI),-Werror,)
WARN      := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wno-unused-parameter $(WERROR)
SAN       ?=
BASE_CFLAGS := -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -D_GNU_SOURCE $(WARN) $(SAN) -Iinclude
# The library and its C tests see the internal headers; the extension and the
# examples see only the public header.
CFLAGS    := $(BASE_CFLAGS) -Isrc -I/usr/include/x86_64-linux-gnu/openblas-pthread
LDLIBS    := -lsleef -lopenblas -lfftw3 -lfftw3f -lm -lpthread
# OpenMPI (olympus.distributed, src/rt/mpi.c) when mpicc is there; `make MPI=0`
# builds without it (every distributed call then says so). Its headers are
# -isystem: our warnings are not its.
MPI       ?= $(if $(shell command -v mpicc 2>/dev/null),1,0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DOLY_HAVE_MPI $(patsubst -I%,-isystem %,$(shell mpicc --showme:compile 2>/dev/null))
LDLIBS    += $(shell mpicc --showme:link 2>/dev/null)
endif
# mpirun as root needs these (harmless otherwise); 2 processes on any machine.
MPIRUN    := OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -n 2 --oversubscribe

LIB_SRC   := $(sort $(wildcard src/*/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  := $(sort $(wildcard tests/c/*.c))
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
EXT_SRC   := $(sort $(wildcard python/olympus/_core/*.c))
EXT_OBJ   := $(EXT_SRC:%.c=$(BUILD)/%.o)
C_EXAMPLES := $(patsubst examples/c/%.c,$(BUILD)/examples/%,$(wildcard examples/c/*.c))
# FFI kernel libraries (olympus.ffi), built as a user builds one: the public
# header only, no olympus library, default visibility (ctypes loads them).
FFI_CFLAGS := -std=c11 $(OPT) -g -fPIC -shared $(WARN) $(SAN) -Iinclude
FFI_LIBS  := $(BUILD)/libolympus_ffi_test.so \
             $(patsubst examples/ffi/%.c,$(BUILD)/examples/ffi/lib%.so,$(wildcard examples/ffi/*.c))

PY_INC    := $(shell $(PY) -c "import sysconfig;print(sysconfig.get_paths()['include'])" 2>/dev/null)
NP_INC    := $(shell $(PY) -c "import numpy;print(numpy.get_include())" 2>/dev/null)
EXT_SUFFIX := $(shell $(PY) -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null)
EXT       := $(BUILD)/_core$(EXT_SUFFIX)
INPLACE_EXT := python/olympus/_core$(EXT_SUFFIX)
HEADERS   := include/olympus.h src/internal.h $(wildcard src/*/*.h src/prims/prims.def) \
             $(wildcard python/olympus/_core/*.h)

.PHONY: all deps test test-c test-python check-layers demo asan tsan fuzz clean bench examples-c
all: $(BUILD)/libolympus.a $(BUILD)/libolympus.so $(EXT) $(C_EXAMPLES) $(FFI_LIBS) \
     $(if $(filter build,$(BUILD)),$(INPLACE_EXT))

# The extension is loaded from $(BUILD) when OLYMPUS_EXT_DIR names it (parallel
# or sanitizer builds), else from the in-place copy.
$(INPLACE_EXT): $(EXT)
	cp $< $@

deps:
	@bash scripts/install-deps.sh

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Only the transport sees mpi.h; an MPI=0 build needs its own BUILD folder.
$(BUILD)/src/rt/mpi.o: CFLAGS += $(MPI_CFLAGS)

# The extension sees the public header and, for its primitive enum, a copy of
# prims.def (the list of primitives) in $(BUILD)/gen/ — no other src/ file.
$(BUILD)/gen/prims.def: src/prims/prims.def
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/python/olympus/_core/%.o: python/olympus/_core/%.c $(HEADERS) $(BUILD)/gen/prims.def
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -I$(PY_INC) -I$(NP_INC) -Ipython/olympus/_core -I$(BUILD)/gen -c $< -o $@

$(BUILD)/libolympus.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libolympus.so: $(LIB_OBJ)
	$(CC) -shared $(SAN) -o $@ $^ $(LDLIBS)

# --exclude-libs: the library's public names stay inside the extension, which
# exports only PyInit__core.
$(EXT): $(EXT_OBJ) $(BUILD)/libolympus.a
	$(CC) -shared $(SAN) -Wl,--exclude-libs,ALL -o $@ $(EXT_OBJ) $(BUILD)/libolympus.a $(LDLIBS)

# The fuzz smoke test compiles the fuzz target in.
$(BUILD)/tests/c/test_fuzz_smoke.o: tests/fuzz/fuzz_program.c

$(BUILD)/test_c: $(TEST_OBJ) $(BUILD)/libolympus.a
	$(CC) $(SAN) -o $@ $(TEST_OBJ) $(BUILD)/libolympus.a $(LDLIBS)

$(BUILD)/examples/%: examples/c/%.c $(BUILD)/libolympus.a include/olympus.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -o $@ $< $(BUILD)/libolympus.a $(LDLIBS)

$(BUILD)/libolympus_ffi_test.so: tests/python/ffi_kernels.c include/olympus.h
	@mkdir -p $(dir $@)
	$(CC) $(FFI_CFLAGS) -o $@ $< -lm

$(BUILD)/examples/ffi/lib%.so: examples/ffi/%.c include/olympus.h
	@mkdir -p $(dir $@)
	$(CC) $(FFI_CFLAGS) -o $@ $< -lm

# The stream and device tests run again with three devices.
MULTI_DEVICE_TESTS := stream_ pmap_
# The kernel tests run again at every CPU level this machine supports
# (OLYMPUS_CPU_LEVEL; `test_c --cpu-levels` lists them, best last): the C
# tests whose kernels have per-level loops at every level, a Python subset at
# every level below the best (the full run above used the best).
CPU_LEVEL_TESTS := cpu_level elementwise reduce linalg random rules_elementwise rules_special \
                   structural special sort
CPU_LEVEL_PY_TESTS := test_numpy.py test_special.py test_random.py test_linalg.py test_nn.py \
                      test_scipy.py
define run_cpu_levels # $(1): test_c; $(2): environment before it
	@for lv in $$($(1) --cpu-levels); do \
	  echo "OLYMPUS_CPU_LEVEL=$$lv $(1) $(CPU_LEVEL_TESTS)"; \
	  $(2) OLYMPUS_CPU_LEVEL=$$lv $(1) $(CPU_LEVEL_TESTS) || exit 1; \
	done
endef
test-c: $(BUILD)/test_c $(C_EXAMPLES)
	$(BUILD)/test_c
	OLYMPUS_NUM_CPU_DEVICES=3 $(BUILD)/test_c $(MULTI_DEVICE_TESTS)
	OLYMPUS_NUM_CPU_DEVICES=4 $(BUILD)/test_c pmap_
	$(call run_cpu_levels,$(BUILD)/test_c,)
ifeq ($(MPI),1)
	$(MPIRUN) $(BUILD)/test_c mpi_
	for c in notice timeout mismatch; do \
	  OLYMPUS_COLLECTIVE_TIMEOUT=1 $(MPIRUN) $(BUILD)/test_c mpifail_$$c || exit 1; done
	OLYMPUS_NUM_CPU_DEVICES=2 $(MPIRUN) $(BUILD)/test_c mpigroup_
	OLYMPUS_NUM_CPU_DEVICES=2 OLYMPUS_COLLECTIVE_TIMEOUT=10 $(MPIRUN) $(BUILD)/test_c mpigroupfail_
endif

test-python: $(EXT) $(FFI_LIBS) $(BUILD)/test_c
	cd tests/python && PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) -m pytest -q -p no:cacheprovider .
	@levels="$$($(BUILD)/test_c --cpu-levels)"; for lv in $$levels; do \
	  [ "$$lv" = "$${levels##* }" ] && continue; \
	  echo "OLYMPUS_CPU_LEVEL=$$lv pytest $(CPU_LEVEL_PY_TESTS)"; \
	  (cd tests/python && OLYMPUS_CPU_LEVEL=$$lv PYTHONPATH=$(CURDIR)/python \
	    OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) -m pytest -q -p no:cacheprovider \
	    $(CPU_LEVEL_PY_TESTS)) || exit 1; \
	done

# The layer arrows and the exported names, read from the built objects
# (scripts/check_layers.py says which arrows are allowed).
check-layers: all
	$(PY) scripts/check_layers.py $(BUILD) include/olympus.h $(BUILD)/libolympus.so $(EXT)

test: deps
	$(MAKE) all
	$(MAKE) check-layers
	$(MAKE) test-c
	$(MAKE) test-python
	PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) examples/external_callbacks.py > /dev/null
	PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) examples/catalyst_callbacks.py > /dev/null
	PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) examples/mlp.py > /dev/null

demo: deps
	$(MAKE) all
	PYTHONPATH=$(CURDIR)/python $(PY) examples/external_callbacks.py

# ASan + UBSan over the C tests and pytest (the extension is built with the
# sanitizers and the runtime preloaded into the interpreter).
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
asan: deps
	$(MAKE) BUILD=build-asan SAN="$(ASAN_FLAGS)" OPT=-O1 all build-asan/test_c
	ASAN_OPTIONS=detect_leaks=1 build-asan/test_c
	ASAN_OPTIONS=detect_leaks=1 OLYMPUS_NUM_CPU_DEVICES=3 build-asan/test_c $(MULTI_DEVICE_TESTS)
	$(call run_cpu_levels,build-asan/test_c,ASAN_OPTIONS=detect_leaks=1)
	cd tests/python && PYTHONPATH=$(CURDIR)/python \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 OLYMPUS_EXT_DIR=$(CURDIR)/build-asan \
	  $(PY) -m pytest -q -p no:cacheprovider .

# ThreadSanitizer over the C tests (concurrent runs, re-entrant host functions).
tsan: deps
	$(MAKE) BUILD=build-tsan SAN="-fsanitize=thread" OPT=-O1 build-tsan/test_c
	TSAN_OPTIONS=halt_on_error=1 build-tsan/test_c
	TSAN_OPTIONS=halt_on_error=1 OLYMPUS_NUM_CPU_DEVICES=3 build-tsan/test_c $(MULTI_DEVICE_TESTS)
	TSAN_OPTIONS=halt_on_error=1 OLYMPUS_NUM_CPU_DEVICES=4 build-tsan/test_c pmap_
ifeq ($(MPI),1)
	OLYMPUS_NUM_CPU_DEVICES=2 TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/c/tsan_mpi.supp" \
	  $(MPIRUN) -x TSAN_OPTIONS build-tsan/test_c mpigroup_
endif

# libFuzzer over the builder, verifier, transforms and executor: the library and
# tests/fuzz/fuzz_program.c built with clang, ASan and UBSan, run FUZZ_SECONDS.
# New inputs go to build-fuzz/corpus, crashes to build-fuzz/crash-*; replay one
# with `build-fuzz/fuzz_program FILE`.
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
fuzz:
	@bash scripts/install-deps.sh clang
	$(MAKE) BUILD=build-fuzz CC=clang WERROR= OPT=-O1 \
	  SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" build-fuzz/fuzz_program
	@mkdir -p build-fuzz/corpus
	build-fuzz/fuzz_program -max_total_time=$(FUZZ_SECONDS) -max_len=256 -len_control=0 -timeout=20 \
	  -artifact_prefix=build-fuzz/ build-fuzz/corpus tests/fuzz/corpus

build-fuzz/fuzz_program: tests/fuzz/fuzz_program.c build-fuzz/libolympus.a include/olympus.h
	clang -std=c11 -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer -Iinclude -o $@ $< \
	  build-fuzz/libolympus.a $(LDLIBS)

bench: deps
	@bash scripts/install-deps.sh python3-numba python3-cffi
	$(MAKE) all
	PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) bench/run.py
	PYTHONPATH=$(CURDIR)/python OLYMPUS_EXT_DIR=$(CURDIR)/$(BUILD) $(PY) bench/soak_host_callback.py

clean:
	rm -rf build build-* python/olympus/_core*.so

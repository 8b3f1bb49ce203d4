/* SPDX-License-Identifier: BSD-3-Clause */
/* symbolize -- addresses to function, file:line.  See symbolize.h. */
#include "diagnose/symbolize.h"

#include "prim/prim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char *program_invocation_name;

/* The function from the dynamic symbol table: what is known without
 * debug information. */
static void symbol_from_dladdr(uintptr_t at, struct symbol *out)
{
	snprintf(out->function, sizeof(out->function), "??");
	out->file[0] = '\0';
	out->line = 0;
	out->object = program_invocation_name;
	Dl_info di;
	if (dladdr((void *)at, &di) != 0) {
		if (di.dli_fname != NULL && di.dli_fname[0] != '\0')
			out->object = di.dli_fname;
		if (di.dli_sname != NULL)
			snprintf(out->function, sizeof(out->function), "%s", di.dli_sname);
	}
}

#ifdef PMT_HAVE_LIBDW
#include <elfutils/libdwfl.h>

/* libdw's entry points, resolved from libdw.so.1 at run time. */
static struct {
	void *handle;
	Dwfl *dwfl;
	Dwfl *(*begin)(const Dwfl_Callbacks *);
	void (*end)(Dwfl *);
	int (*proc_report)(Dwfl *, pid_t);
	int (*report_end)(Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr,
					 void *), void *);
	Dwfl_Module *(*addrmodule)(Dwfl *, Dwarf_Addr);
	Dwfl_Line *(*getsrc)(Dwfl_Module *, Dwarf_Addr);
	const char *(*lineinfo)(Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *,
				Dwarf_Word *);
	const char *(*addrname)(Dwfl_Module *, GElf_Addr);
	int (*find_elf)(Dwfl_Module *, void **, const char *, Dwarf_Addr, char **, Elf **);
	int (*find_debuginfo)(Dwfl_Module *, void **, const char *, Dwarf_Addr, const char *,
			      const char *, GElf_Word, char **);
} dw;

static Dwfl_Callbacks callbacks;

#define RESOLVE(field, name) ((*(void **)&dw.field = dlsym(dw.handle, name)) != NULL)

bool symbolize_open(void)
{
	if (dw.dwfl != NULL)
		return true;
	dw.handle = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
	if (dw.handle == NULL)
		return false;
	if (!(RESOLVE(begin, "dwfl_begin") && RESOLVE(end, "dwfl_end") &&
	      RESOLVE(proc_report, "dwfl_linux_proc_report") &&
	      RESOLVE(report_end, "dwfl_report_end") && RESOLVE(addrmodule, "dwfl_addrmodule") &&
	      RESOLVE(getsrc, "dwfl_module_getsrc") && RESOLVE(lineinfo, "dwfl_lineinfo") &&
	      RESOLVE(addrname, "dwfl_module_addrname") &&
	      RESOLVE(find_elf, "dwfl_linux_proc_find_elf") &&
	      RESOLVE(find_debuginfo, "dwfl_standard_find_debuginfo"))) {
		symbolize_close();
		return false;
	}
	callbacks.find_elf = dw.find_elf;
	callbacks.find_debuginfo = dw.find_debuginfo;
	dw.dwfl = dw.begin(&callbacks);
	if (dw.dwfl == NULL || dw.proc_report(dw.dwfl, prim_getpid()) != 0 ||
	    dw.report_end(dw.dwfl, NULL, NULL) != 0) {
		symbolize_close();
		return false;
	}
	return true;
}

void symbolize(uintptr_t ip, bool return_address, struct symbol *out)
{
	uintptr_t at = return_address && ip != 0 ? ip - 1 : ip;
	symbol_from_dladdr(at, out);
	if (dw.dwfl == NULL)
		return;
	Dwfl_Module *m = dw.addrmodule(dw.dwfl, at);
	if (m == NULL)
		return;
	const char *name = dw.addrname(m, at);
	if (name != NULL)
		snprintf(out->function, sizeof(out->function), "%s", name);
	Dwfl_Line *l = dw.getsrc(m, at);
	int line = 0;
	const char *file = l != NULL ? dw.lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
	if (file != NULL) {
		snprintf(out->file, sizeof(out->file), "%s", file);
		out->line = line;
	}
}

void symbolize_close(void)
{
	if (dw.dwfl != NULL)
		dw.end(dw.dwfl);
	if (dw.handle != NULL)
		dlclose(dw.handle);
	memset(&dw, 0, sizeof(dw));
}

void symbolize_atfork_child(void) { memset(&dw, 0, sizeof(dw)); }

#else /* built without libdw's headers: function names only */

bool symbolize_open(void) { return false; }
void symbolize_close(void) {}
void symbolize_atfork_child(void) {}

void symbolize(uintptr_t ip, bool return_address, struct symbol *out)
{
	symbol_from_dladdr(return_address && ip != 0 ? ip - 1 : ip, out);
}

#endif

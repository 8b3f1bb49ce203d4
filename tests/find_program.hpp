/* SPDX-License-Identifier: BSD-3-Clause */
// Where a program is: the first directory of PATH that has it, then the
// system directories a user's PATH often lacks (Debian puts varnishd in
// /usr/sbin).  catch_main.cpp's PMT_TEST_NEEDS checks and the corpus cases
// look programs up the same way.
#ifndef PMT_TESTS_FIND_PROGRAM_HPP
#define PMT_TESTS_FIND_PROGRAM_HPP

#include <cstdlib>
#include <sstream>
#include <string>
#include <unistd.h>

// The path of `name`, or "" when there is none.
inline std::string find_program(const std::string &name)
{
	const char *path = getenv("PATH");
	std::istringstream dirs(std::string(path != nullptr ? path : "") +
				":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin");
	for (std::string d; std::getline(dirs, d, ':');) {
		if (d.empty())
			continue;
		std::string p = d + "/" + name;
		if (access(p.c_str(), X_OK) == 0)
			return p;
	}
	return "";
}

#endif

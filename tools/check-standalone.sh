#!/bin/sh
# Fails when the repository stops standing on its own: when a file names an absolute path of a
# particular machine, refers to a file outside the repository, cites a specification that is not
# in it, or speaks of how the code was developed instead of what it is. A fresh clone with no
# sibling folders must build, test and read completely; this check (part of `make test`) keeps it
# so. It reads the text files git knows about (tracked, or untracked and not ignored), so build
# folders and results never count; outside a git checkout it walks the tree instead, skipping
# .git and build folders.
#
# What fails, each reported as FILE:LINE: reason: text
#   - absolute home or work-area paths: /work/..., /root/..., /home/..., /Users/... (portable
#     spellings such as $(HOME), ~ and ~root are fine, and so are system paths like /usr/local);
#   - a relative path that climbs out of the repository (../name resolved from the file's folder,
#     or from the repository root for make files and scripts, which run there), and any
#     ../shared or ../seed;
#   - citations of an outside specification ("SPEC section N", "SPEC §N", "SPEC:"), and of a
#     docs/NAME.md page that does not exist;
#   - development-history wording: session, "the issue(s)" (instruction-issue figures excepted),
#     issue numbers, closing note, ticket, steering, diary, ledger, agent, the device tool,
#     lent/lending, "a call can carry", the CUDA engineer.
#
# Exempt: bindings/rust/memra-engine/tests/gdn_packed_gpu.rs, memra-engine's acceptance test, kept
# byte for byte as its authors wrote it (its comments describe their machines, not this
# repository); the fuzz corpus (binary inputs); and this file, which has to spell the patterns.
#
# usage: tools/check-standalone.sh [ROOT]    (default: the repository this script is in)
set -eu

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    list() { git ls-files -z --cached --others --exclude-standard; }
else
    list() {
        find . \( -name .git -o -name 'build' -o -name 'build-*' -o -name results \
            -o -name target -o -name gpu-stage \) -prune -o -type f -print0 |
            sed -z 's|^\./||'
    }
fi

list | perl -0 -ne '
    BEGIN { $bad = 0; $files = 0; }
    chomp;
    my $f = $_;
    next if $f eq "tools/check-standalone.sh"
         || $f eq "bindings/rust/memra-engine/tests/gdn_packed_gpu.rs"
         || $f =~ m{^tests/fuzz/corpus/};
    next unless -f $f && -T $f;    # text files only
    open(my $fh, "<", $f) or next;
    local $/ = "\n";    # the file list is NUL-separated, the files are read by lines
    $files++;
    # Folder depth a bare ../ is resolved against: make files and scripts run from the root.
    my $base = ($f =~ m{(^|/)Makefile$|\.mk$|\.sh$|^\.ci/}) ? 0 : (() = $f =~ m{/}g);
    while (my $l = <$fh>) {
        my @why;
        push @why, "absolute machine path"
            if $l =~ m{(?<![\w.~\$\}-])/(?:work|root|home|Users)/};
        push @why, "reference outside the repository (../shared, ../seed)"
            if $l =~ m{\.\./(?:shared|seed)\b};
        while ($l =~ m{(?<![\w.\$\}/-])((?:\.\./)+)[\w\$]}g) {
            my $up = length($1) / 3;
            if ($up > $base) { push @why, "relative path leaves the repository"; last; }
        }
        while ($l =~ m{\bdocs/([\w-]+\.md)}g) {
            push @why, "names docs/$1, which does not exist" unless -e "docs/$1";
        }
        push @why, "cites an outside specification"
            if $l =~ m{\bSPEC(?: section|:|\x27s| ?\xc2\xa7)};
        push @why, "development-history wording"
            if $l =~ m{\bsessions?\b
                      | \bthe\ issues?\b(?!\ (?:rate|time|width|slot|queue|cost|port|limit))
                      | \bissues?\ \#[0-9]+
                      | \bclosing\ notes?\b | \btickets?\b | \bsteering\b | \bdiary\b
                      | \bledger\b | \bagents?\b | \bdevice\ tool\b | \blent\b | \blending\b
                      | \ba\ call\ can\ carry\b | \bthe\ CUDA\ engineer\b}xi;
        next unless @why;
        $bad++;
        my $text = $l; chomp $text; $text =~ s/^\s+//;
        $text = substr($text, 0, 120) . "..." if length($text) > 123;
        printf STDERR "%s:%d: %s: %s\n", $f, $., join("; ", @why), $text;
    }
    close $fh;
    END {
        if ($bad) {
            print STDERR "check-standalone: $bad line(s) above: the repository must not depend " .
                "on, or speak of, anything outside itself\n";
            exit 1;
        }
        print "check-standalone: $files text files, no machine path, no outside reference, " .
            "no development-history wording\n";
    }
'

#!/bin/sh
# Fails when the host runtime's files stop forming one-way layers. src/engine.h declares the
# layers, bottom first, in its opening comment (the lines `*   NAME: FILE FILE ...` after
# "Layers, bottom first"); that list is the one this script enforces, so the documentation and
# the check cannot drift apart. Read bottom to top, the list is also an order of the files, and
# every file may use only what is listed before it:
#
#   - a quoted #include must name a file listed before the including one (memra.h and
#     kernels.h, the public header and the kernel interface, lie below every layer);
#   - a function or variable named memra_* and defined in one file, when another file uses it,
#     must be defined in a file listed before the user.
#
# Both rules together leave no include cycle and no call cycle between files, and no lower layer
# that reaches into a higher one. Calls made through a function pointer (the backend table, the
# failure hook of status.h) are not seen here; they are how a lower layer is called back without
# naming the layer above. Every src/*.c and src/*.h must be listed, exactly once, so that a new
# file has to be given its place. Comments and string literals are ignored.
#
# usage: tools/check-layers.sh [ROOT]    (default: the repository this script is in)
set -eu

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

perl -e '
    use strict;
    use warnings;
    my @external = ("memra.h", "kernels.h");
    my (%pos, %layer, @order, $bad);
    sub blank {
        my ($m) = @_;
        return (($m =~ /^"/) ? "\"\"" : "") . ("\n" x ($m =~ tr/\n//));
    }
    $bad = 0;

    # The declared list, from the opening comment of src/engine.h.
    open(my $doc, "<", "src/engine.h") or die "check-layers: cannot read src/engine.h\n";
    my $in = 0;
    while (my $l = <$doc>) {
        if (!$in) {
            $in = 1 if $l =~ /Layers, bottom first/;
            next;
        }
        last unless $l =~ /^\s*\*\s+([a-z]+):\s+(\S.*?)\s*$/;
        my $name = $1;
        for my $f (split /\s+/, $2) {
            if (exists $pos{$f}) {
                print STDERR "check-layers: src/$f is listed twice in src/engine.h\n";
                $bad = 1;
            }
            $pos{$f} = scalar @order;
            $layer{$f} = $name;
            push @order, $f;
        }
    }
    close $doc;
    die "check-layers: no \"Layers, bottom first\" list in src/engine.h\n" unless @order;

    for my $path (sort glob("src/*.c src/*.h")) {
        (my $f = $path) =~ s{^src/}{};
        next if exists $pos{$f};
        print STDERR "check-layers: $path is not in the layer list of src/engine.h\n";
        $bad = 1;
    }

    # Each file without its comments and string literals, kept line by line for messages.
    my %code;
    for my $f (@order) {
        open(my $fh, "<", "src/$f") or do {
            print STDERR "check-layers: src/$f is listed in src/engine.h but does not exist\n";
            $bad = 1;
            next;
        };
        local $/;
        my $text = <$fh>;
        close $fh;
        my $includes = $text;
        # A comment or literal becomes its line breaks alone (a string keeps its quotes), so
        # that line numbers still match the file.
        $text =~ s{/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\x27(?:\\.|[^\x27\\\n])*\x27}
                  {blank($&)}gse;
        $code{$f} = $text;
        my $n = 0;
        for my $l (split /\n/, $includes) {
            $n++;
            next unless $l =~ /^\s*#\s*include\s+"([^"]+)"/;
            my $h = $1;
            next if grep { $_ eq $h } @external;
            if (!exists $pos{$h}) {
                print STDERR "check-layers: src/$f:$n includes \"$h\", which is neither in the "
                  . "layer list nor one of @external\n";
                $bad = 1;
            } elsif ($pos{$h} >= $pos{$f}) {
                print STDERR "check-layers: src/$f:$n ($layer{$f}) includes $h ($layer{$h}), "
                  . "which is listed after it\n";
                $bad = 1;
            }
        }
    }

    # Definitions: a line at column 0 that is not static, naming memra_x followed by ( or =.
    my %def;
    for my $f (grep { /\.c$/ } @order) {
        next unless defined $code{$f};
        for my $l (split /\n/, $code{$f}) {
            next if $l =~ /^(?:\s|#|static\b|typedef\b|extern\b|\}|$)/;
            $def{$1} = $f if $l =~ /\b(memra_[a-z0-9_]+)\s*(?:\(|=)/;
        }
    }
    for my $f (grep { /\.c$/ } @order) {
        next unless defined $code{$f};
        my ($n, %seen) = (0);
        for my $l (split /\n/, $code{$f}) {
            $n++;
            while ($l =~ /\b(memra_[a-z0-9_]+)\b/g) {
                my $name = $1;
                my $d = $def{$name};
                next if !defined $d || $d eq $f || $seen{$name}++;
                next if $pos{$d} < $pos{$f};
                print STDERR "check-layers: src/$f:$n ($layer{$f}) uses $name of src/$d "
                  . "($layer{$d}), which is listed after it\n";
                $bad = 1;
            }
        }
    }

    exit 1 if $bad;
    my %layers = map { $_ => 1 } values %layer;
    printf "check-layers: %d files in %d layers, every include and call goes down the list\n",
      scalar @order, scalar keys %layers;
'

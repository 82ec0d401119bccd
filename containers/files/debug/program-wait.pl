# program-wait.pl PROGRAM: run PROGRAM under bash and report its wait status
# with the marks program-pane describes. The key comes in the environment,
# which the program does not get. system() ignores SIGINT and SIGQUIT while
# it waits, so a Ctrl-C ends the program, not the pane.
use strict;
use Config;
my $k = delete $ENV{STEM_PANE_KEY};
$| = 1;
print "\e]133;A;$k\a\e]133;C;$k\a";
system {"bash"} "bash", "-c", $ARGV[0];
my ($st, $sig) = (0, 0);
if ($? == -1) { $st = 127; print STDERR "[stem] cannot run bash: $!\n"; }
elsif ($? & 127) { $sig = $? & 127; $st = 128 + $sig; }
else { $st = $? >> 8; }
print "\e]133;C;$k\a\e]133;stem-wait;$st;$sig;$k\a\e]133;D;$st;$k\a";
if ($sig) {
	my @n = split " ", $Config{sig_name};
	printf "\n[stem] the program was killed by signal %d (SIG%s)\n", $sig, $n[$sig] // "?";
} else {
	printf "\n[stem] the program exited with status %d\n", $st;
}
exec {"bash"} "bash", "-i";
die "[stem] cannot start bash: $!\n";

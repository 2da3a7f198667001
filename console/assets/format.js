// How the page words sessions: pure functions, no DOM (tests/format.test.mjs runs them in Node).

// argv as a person would type it: words with spaces or shell characters in single quotes.
export function commandLine(argv) {
  return argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export function age(seconds) {
  if (seconds < 60) return `${Math.max(0, Math.floor(seconds))}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

export const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });

export function exitText(exit) {
  if (!exit) return '';
  if (exit.status === 'exited') return `exit ${exit.code}`;
  if (exit.status === 'signaled') return `signal ${exit.signal}${exit.core_dumped ? ' (core dumped)' : ''}`;
  return 'ended';
}

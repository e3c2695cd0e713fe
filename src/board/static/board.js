// The board's own few lines of JavaScript; every page works without them.

// Copy buttons (the Vend page). Without JavaScript the text stays selectable.
document.addEventListener('click', (event) => {
  const button = event.target.closest('button[data-copy]');
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent).then(
    () => { button.textContent = 'Copied'; },
    () => { button.textContent = 'Select and copy'; },
  );
});

// Lease countdowns: `data-countdown` holds the lease's end (RFC 3339); the
// server's text is right when rendered, this keeps it right between refreshes.
function countdowns() {
  const now = Date.now();
  for (const el of document.querySelectorAll('[data-countdown]')) {
    const left = Math.max(0, Math.round((Date.parse(el.dataset.countdown) - now) / 1000));
    if (Number.isNaN(left)) continue;
    el.textContent = left >= 3600
      ? `${Math.floor(left / 3600)} h ${Math.floor((left % 3600) / 60)} min`
      : left >= 60 ? `${Math.floor(left / 60)} min ${left % 60} s` : `${left} s`;
  }
}
setInterval(countdowns, 1000);

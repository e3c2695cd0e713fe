// Copy buttons of the Vend page. Without JavaScript the text stays selectable.
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

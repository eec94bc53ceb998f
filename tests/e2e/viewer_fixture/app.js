// A stand-in for the viewer's bundle in the server's tests: reads the data the way the real
// one does (the inline element of --html, else data.json) and lists the routines as text.
(async () => {
  const status = document.getElementById('status');
  try {
    const inline = document.getElementById('sonde-data');
    const bundle = inline ? JSON.parse(inline.textContent)
                          : await (await fetch('data.json' + location.search)).json();
    const list = document.getElementById('routines');
    for (const profile of bundle.profiles)
      for (const row of profile.rows ?? profile.report?.rows ?? []) {
        const item = document.createElement('li');
        item.textContent = row.routine ?? row.name;
        list.appendChild(item);
      }
    status.textContent = `format_version ${bundle.format_version}`;
  } catch (e) {
    status.textContent = `failed: ${e}`;
  }
})();

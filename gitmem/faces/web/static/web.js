// gitmem web: the little the pages need. Scroll to the first marked hit, ask before a restore.
document.addEventListener("DOMContentLoaded", () => {
  const hit = document.querySelector("main .hit");
  if (hit) hit.scrollIntoView({block: "center"});
  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
});

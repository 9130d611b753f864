/* The image options of the dataset forms (DIGITS's image type, resize size and mode, and
 * encoding): the same fields, names and choices on the classification form
 * (dataset-new.html) and on the data extensions that resize (dataset-generic-new.html).
 *
 *   CD.imageFields.render(root)  writes the fields where each <div data-image-fields>
 *     of root stands; what that div holds (the resize preview) goes after the resize
 *     transformation. Call it before looking the fields up.
 *   CD.imageFields.MODES  [[resize_mode, label], ...]
 */
'use strict';

(function () {
  const {el, $$} = CD;

  const MODES = [['squash', 'Squash'], ['crop', 'Crop'], ['fill', 'Fill'], ['half_crop', 'Half crop, half fill']];
  const CHANNELS = [['1', 'Grayscale'], ['3', 'Color']];
  const ENCODINGS = [['png', 'PNG (lossless)'], ['jpg', 'JPEG (lossy, 90% quality)'], ['none', 'None']];

  function select(name, choices, chosen) {
    return el('select', {id: name, name},
      choices.map(([value, text]) => el('option', {value, text, selected: value === chosen})));
  }

  function size(name, label) {
    return CD.field(label, el('input', {type: 'number', id: name, name, value: '256', min: '1', max: '4096', required: true}));
  }

  function render(root) {
    for (const slot of $$('[data-image-fields]', root)) {
      slot.replaceWith(
        CD.field('Image type', select('resize_channels', CHANNELS, '3'),
          {help: 'Grayscale images have one channel, color images three (RGB). Images are converted as they are read.'}),
        el('div', {class: 'field-row'}, size('resize_width', 'Resize width'), size('resize_height', 'Resize height')),
        el('span', {class: 'help small muted',
          text: 'Every image is resized to this size (pixels). LeNet expects 28×28 grayscale; AlexNet and GoogLeNet 256×256 color.'}),
        CD.field('Resize transformation', select('resize_mode', MODES, 'squash'),
          {help: 'Options for dealing with aspect ratio changes during resize.'}),
        ...slot.childNodes,
        CD.field('Image encoding', select('encoding', ENCODINGS, 'png'),
          {help: 'Using either of these compression formats can save disk space, but can also require marginally more time for training.'}));
    }
  }

  CD.imageFields = {MODES, render};
})();
